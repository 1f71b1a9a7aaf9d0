"""specreplay analysis: tables, metrics, plots. Offline side: never imports torch."""
