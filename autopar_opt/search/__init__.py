"""autopar_opt.search"""
