"""The one catalogue of checks: every validator rule and probe diagnostic with its code,
level, requirement and fixes (`catalogue`); the one finding type (`findings`); the one
report writer for text, JSON, Markdown and JUnit (`report`)."""
