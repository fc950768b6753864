"""Every kernel family, imported explicitly so the supported list is readable in one file."""
