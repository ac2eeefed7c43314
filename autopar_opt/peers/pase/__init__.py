"""autopar_opt.peers.pase."""
