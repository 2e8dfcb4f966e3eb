"""The one thing pyproject.toml cannot declare: the optional C accelerator of the record codec.

optional=True: where the extension does not compile (no compiler, no Python headers), the build warns and installs
kfk without it, and kfk.records.accelerator falls back to the pure-Python codec.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("kfk.records._accel", ["kfk/records/_accel.c"], optional=True)])
