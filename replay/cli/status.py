"""The exit statuses of every command and the debug switch (light: imported before the commands)."""

EXIT_OK, EXIT_ERROR, EXIT_INTERRUPTED = 0, 2, 130  # 1 (some input skipped): each command's own return
DEBUG_ENV = "SPECREPLAY_DEBUG"  # set (not 0) to print an error's traceback, as --debug
