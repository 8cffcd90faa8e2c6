"""The run folder (``--workdir``): its layout and config.json, in one place (folder.py)."""
