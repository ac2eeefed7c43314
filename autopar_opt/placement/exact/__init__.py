"""autopar_opt.placement.exact."""
