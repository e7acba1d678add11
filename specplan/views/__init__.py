"""Views: explain (text and streamed JSON), one round's view; they compute nothing the plan does not hold."""
