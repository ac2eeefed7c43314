"""autopar_opt.dp"""
