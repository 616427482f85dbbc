"""Measuring answers: QA sets (qa) and the scores eval reports over them (scoring)."""
