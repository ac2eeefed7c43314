"""autopar_opt.formulations"""
