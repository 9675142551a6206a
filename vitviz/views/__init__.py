"""What each tab shows: figures and text composed from the vitviz modules (no gradio here either)."""
