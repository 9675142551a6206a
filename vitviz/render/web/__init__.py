"""The scripts and styles of the views drawn in the browser (loaded by app.py into gr.HTML)."""
