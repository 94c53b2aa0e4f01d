"""The studio: Streamlit app glue, view builders and the command line."""
