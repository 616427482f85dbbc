"""The source view: the cited page, rendered, with the passage highlighted. It never parses a
document: controllers.sources reads text formats' pages in a parse pool child.

    view       SourceView, the coordinator: title, page and zoom buttons, the stack, its signals;
               opens a citation and chooses which page shows it (or a message)
    pdf_page   PdfPageView: a PDF page by QtPdf, the passage's boxes mapped from PDFium's
               characters (or a scan's recognised words) painted over it; fit width
    text_page  TextPage: another format's pages as read-only text, the passage marked; its tab
               stops and zoom
"""
