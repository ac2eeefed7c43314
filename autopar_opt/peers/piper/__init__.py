"""autopar_opt.peers.piper."""
