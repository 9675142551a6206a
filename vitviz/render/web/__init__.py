"""The scripts and styles of the views drawn in the browser (the app gives them to gr.HTML components)."""
