"""The source view: the cited page, rendered, with the passage highlighted. It never parses a
document: controllers.sources reads text formats' pages in a parse pool child."""
