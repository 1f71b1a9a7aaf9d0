"""The live harness: real draft and target models, one-forward tree verification, dumps, sweeps.

The only part of specreplay that imports torch. Importing this package itself stays torch-free so
that ``specreplay --help`` (which imports ``replay.cli.cmd_live``) does not load torch.
"""
