"""Decision forests over uint8 windows: axis-aligned, two-probe and CO2."""
