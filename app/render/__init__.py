"""Every page and figure the suite writes: Markdown, LaTeX, matplotlib."""
