//! analysis.md / analysis.json: what the model and search decided, for humans and tools.
