"""autopar_opt.model_zoo"""
