"""(filled in by issue 16: API key, body size limit, CORS)"""


def install(app, config) -> None:
    pass
