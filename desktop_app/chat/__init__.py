"""The chat: answer rendering, the message bubbles and the view that shows a conversation."""
