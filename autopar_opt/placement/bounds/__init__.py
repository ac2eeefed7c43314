"""autopar_opt.placement.bounds."""
