"""rag.server: `rag serve` (FastAPI). `app.create_app(rag, settings=...)` builds the app;
`schemas` holds the request bodies, `events` the JSON and SSE shapes, `static/` the web page.

Importing `rag.server.app` needs the `server` extra (`pip install 'rag-runnables[server]'`).
"""
