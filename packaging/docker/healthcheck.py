"""The image's HEALTHCHECK: GET /health on the server's port ($PORT); exit 0 when it answers 200.

The image has no curl: this is the venv's Python with urllib. /health needs no API key.
"""

import os
import sys
import urllib.request


def main() -> int:
    url = f"http://127.0.0.1:{os.environ.get('PORT', '8080')}/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return 0 if reply.status == 200 else 1
    except OSError as error:
        print(f"{url}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
