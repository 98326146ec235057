"""Components, built-in or the user's: the contracts they meet, naming them by import
path, and a user's script as their home."""
