"""The ground floor: config types and their errors, seeds, writing and reading run files, progress."""
