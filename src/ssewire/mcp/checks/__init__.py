"""The one catalogue of checks: every validator rule and probe diagnostic with its code,
level, requirement and fixes; the finding and verdict values; the report writers."""
