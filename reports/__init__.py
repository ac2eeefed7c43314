"""autopar_opt.reports"""
