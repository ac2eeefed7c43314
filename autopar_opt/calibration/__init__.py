"""autopar_opt.calibration"""
