"""Side panels and dialogs: documents, conversations, settings."""
