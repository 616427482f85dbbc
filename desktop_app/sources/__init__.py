"""The source view: the cited page, rendered, with the passage highlighted."""
