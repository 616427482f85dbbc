"""The chat: render (answers as inert rich text), bubbles (the messages and the input box) and
view (ChatView, the conversation on screen)."""
