"""Constrained decoding: schema -> regex -> byte DFA -> token index -> masks."""
