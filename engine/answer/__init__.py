"""From a question to a cited answer: retrieval (dense + keyword, fused, reranked), grounding (the
relevance gate and the prompt), the lead sentences, the answer guard, the Assistant that
streams typed events, and the AnswerSession (session) that the window, the CLI and the server's
slots ask through: it keeps the collection and the encoders open, follows a bundle switch, and
asks a question again on the local model when the remote engine fails; on a thin kiosk it takes
whole answers from a central server (central), read back from the JSON the server's /v1/ask
sends (events_json)."""
