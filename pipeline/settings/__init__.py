"""Configuration around the schema (``config_optimized.py``): the hardware found
(``hardware.py``), the hardware profiles (``profiles.py``), what earlier versions saved read as
today's settings (``migrate.py``), where each setting comes from (``layers.py``), validation
(``check.py``) and the command line built from the Config fields (``cli.py``, ``help.py``)."""
