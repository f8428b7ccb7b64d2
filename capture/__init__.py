"""Game I/O: backends (ViZDoom, Gymnasium, windows), key maps, the park scenario, scripted experts."""
