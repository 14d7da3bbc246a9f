import type { RequestHandler, Response } from "express";
import { RequestError } from "../../protocol/reasons.js";

/**
 * Refuses a request body whose `Content-Type` is not `application/json` (any parameters) with 415
 * JSON before reading it. A `text/plain` POST is a CORS "simple" request that any web page can make its
 * visitors' browsers send without a preflight; an `application/json` one is not. A request without a
 * body, or with an empty one, passes (the endpoint answers it 400).
 */
export function requireJsonBody(onRefused: (res: Response, text: string) => void): RequestHandler {
  return (req, res, next) => {
    // null: no body at all; false: a body of another type. An empty body has nothing to misread.
    if (req.is("application/json") === false && req.get("Content-Length") !== "0") {
      res.status(415).json({ error: RequestError.unsupportedMediaType });
      onRefused(res, RequestError.unsupportedMediaType);
      return;
    }
    next();
  };
}
