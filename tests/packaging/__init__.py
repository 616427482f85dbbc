"""The installers, built, installed and run as a user would."""
