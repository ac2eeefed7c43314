"""autopar_opt.solvers"""
