"""The folder ``gpu-audit validate -- COMMAND`` puts first on the command's ``PYTHONPATH``: its
``sitecustomize.py`` starts the validate hook at interpreter start-up. A package only so that it
ships with gpu-audit; nothing imports it by this name."""
