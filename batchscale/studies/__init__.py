"""Study specs shipped with the package (the embedded default lives here)."""
