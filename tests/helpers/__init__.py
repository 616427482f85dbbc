"""What the tests share: tiny generated models and documents, a fake clock, factories."""
