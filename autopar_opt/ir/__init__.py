"""autopar_opt.ir."""
