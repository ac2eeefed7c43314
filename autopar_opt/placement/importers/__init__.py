"""autopar_opt.placement.importers."""
