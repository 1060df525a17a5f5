"""Configuration: the hardware found (``hardware.py``), where each setting comes from
(``layers.py``), validation (``check.py``) and the command line built from the Config fields
(``cli.py``)."""
