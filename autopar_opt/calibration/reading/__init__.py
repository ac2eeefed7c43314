"""autopar_opt.calibration.reading."""
