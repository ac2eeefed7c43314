"""autopar_opt.spec"""
